"""fabric-lsp: Pi session compaction previews, recall and safe compaction commits."""

__version__ = "0.1.0"
