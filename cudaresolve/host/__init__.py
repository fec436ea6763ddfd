"""What the machine is: driver, its CUDA version, and every GPU with its compute capability."""
