"""The bottom layer: the only code that talks to Docker (`client`, docker-py), the registry
HTTP API (`registry`), and the journal of containers a run could not remove (`journal`)."""
