"""Stage 3, what an image holds and where it goes: every layer (`layers`), the inventory of
packages and files (`inventory`), its SBOM (`sbom`) and publishing to a registry
(`publish`)."""
