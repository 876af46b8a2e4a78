"""The VGG-11 twin of pytorch_resnet20.py (same measurement, the trainer's VGG-11 at 3x32x32: five
convolution stages of 64-128-256-512-512 channels, the last pool skipped at 2x2, a 2048-4096-4096-10
classifier with dropout). Prints "vgg11 fp32 tf32 amp" images/s."""
from pytorch_resnet20 import main

if __name__ == "__main__":
    main(["--models", "vgg11"])
