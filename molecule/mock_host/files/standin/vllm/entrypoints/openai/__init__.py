"""The mock host's stand-in for vLLM (see entrypoints/openai/api_server.py): nothing but its server."""
