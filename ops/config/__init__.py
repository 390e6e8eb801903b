"""Configuration: the TOML file as pydantic models, its checks and error lines, secrets, model
endpoints and the registry of training cutoffs."""
