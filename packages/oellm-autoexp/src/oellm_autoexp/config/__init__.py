"""Config: compoconf schema, loader (YAML path or Hydra name), resolvers, validation."""
