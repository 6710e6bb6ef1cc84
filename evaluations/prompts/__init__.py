"""Prompts: a system message and a user template, versioned like eval sets, which the model
target renders for each case (`evaluations.schemas.prompt_template` has the syntax).
`services` saves them, `selectors` reads them and diffs two versions."""
