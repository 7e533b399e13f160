# Rendered by `imagekit adapt` for profile rdma-cluster.
# example/train:1.0 as it is, plus only what that profile needs and the image lacked.
# Each step names the requirement (imagekit's REQUIREMENTS.md IDs) it serves.
FROM example/train:1.0

# F4: no image setting turns the RDMA fabric off (NCCL, Open MPI, UCX).
ENV NCCL_IB_DISABLE="0" OMPI_MCA_pml="ucx"

LABEL io.imagekit.adapted-from="example/train:1.0" \
      io.imagekit.adapted-from.id="sha256:5ource" \
      io.imagekit.adapted.profile="rdma-cluster"
