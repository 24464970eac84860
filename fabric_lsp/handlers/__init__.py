"""LSP handlers. Each module registers its handlers with `@feature(method)`
(`registry.py`); `fabric_lsp/app.py` imports them all and builds the server. Handlers are
thin: decode params -> run the engine in the executor -> return plain JSON."""
