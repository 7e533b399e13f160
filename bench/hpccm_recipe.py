# The same stack as recipes/deepspeed-cu122.yaml, as an hpccm recipe (the anchor users would
# pick instead): CUDA devel base, Python, Open MPI 4.1 built from source, PyTorch, DeepSpeed.
# Used by bench_startup.py to time `hpccm --recipe` next to `imagekit render`.
# ruff: noqa: F821 - hpccm injects Stage0 and the building blocks into the recipe's namespace
Stage0 += baseimage(image="nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04")
Stage0 += python(python2=False)
Stage0 += openmpi(version="4.1.6", cuda=True, infiniband=False)
Stage0 += packages(ospackages=["openssh-server", "openssh-client"])
Stage0 += pip(packages=["torch==2.1.2", "deepspeed==0.12.6", "mpi4py"], pip="pip3")
Stage0 += shell(commands=["mkdir -p /run/sshd", "chmod 0755 /run/sshd"])
Stage0 += environment(variables={"OMPI_ALLOW_RUN_AS_ROOT": "1"})
