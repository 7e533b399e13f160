"""imagekit: reproducible, verified training images for MPI jobs on Kubernetes."""

__version__ = "0.1.0"
