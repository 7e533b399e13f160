"""The prefix of every image label imagekit writes and reads (io.imagekit.*): its own module,
so the check, which reads labels of any image, does not load the recipe machinery for it."""

LABEL_PREFIX = "io.imagekit"
