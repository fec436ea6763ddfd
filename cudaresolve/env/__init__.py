"""What is installed: distributions, their files, and the binary facts of those files."""
