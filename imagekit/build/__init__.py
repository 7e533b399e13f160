"""Stage 2, model -> plan -> build context -> image: the plan (`plan`, pure), recipes checked
with their plans and locks (`validate`), the render of templates into a context (`render`,
`rendercache`), locks and their resolution (`lockfile`, `resolve`), local base images
(`base`), apt mirrors with credentials (`aptauth`), post-build normalization (`normalize`),
the build command itself (`builder`), and RECIPE|IMAGE arguments (`targets`)."""
