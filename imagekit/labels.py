"""The prefix of every image label imagekit writes and reads (io.imagekit.*): its own module,
so the check, which reads labels of any image, does not load the recipe machinery for it."""

LABEL_PREFIX = "io.imagekit"

# What a command puts on every container and network it creates; the value is the run's ID.
# `imagekit clean` removes what carries any of them (a run that was SIGKILLed, an engine that
# went away), and nothing else.
CHECK_LABEL = f"{LABEL_PREFIX}.check"
SMOKE_LABEL = f"{LABEL_PREFIX}.smoke"
INVENTORY_LABEL = f"{LABEL_PREFIX}.inventory"  # diff and sbom
LOCK_LABEL = f"{LABEL_PREFIX}.lock"
ADAPT_LABEL = f"{LABEL_PREFIX}.adapt"  # adapt's probe container
RUN_LABELS = (CHECK_LABEL, SMOKE_LABEL, INVENTORY_LABEL, LOCK_LABEL, ADAPT_LABEL)

# F1-F4: the fabric an image was built for (recipes with network.fabric: rdma), read by the
# check's fabric section and by smoke.
FABRIC_LABEL = f"{LABEL_PREFIX}.fabric"  # tcp | rdma
FABRIC_PROVIDERS_LABEL = f"{LABEL_PREFIX}.fabric.providers"  # mlx5,rxe
FABRIC_UCX_LABEL = f"{LABEL_PREFIX}.fabric.ucx"  # true | false

# A1: the platform an image was built for, on images of a platform other than the default
# (an image's config says it too; the label says imagekit meant it).
PLATFORM_LABEL = f"{LABEL_PREFIX}.platform"  # linux/arm64
