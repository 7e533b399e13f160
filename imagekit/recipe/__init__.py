"""Stage 1, recipe -> validated model: the recipe's pydantic model (`model`), the loader
(strict YAML, `extends` inside its tree, schema with "did you mean") and the compatibility
rules (`compat`). Nothing here plans or builds."""
