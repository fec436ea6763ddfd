"""What the files say: ELF dynamic section, symbol versions, fatbin archs, and the loader's choices."""
