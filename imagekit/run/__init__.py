"""Stage 4, images at work: an MPIJob on one machine (`smoke`), an existing image made ready
(`adapt`), launch lines, their linter and MPIJob manifests (`launch`), and removing what
killed runs left (`clean`)."""
