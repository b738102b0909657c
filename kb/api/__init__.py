"""litestar controllers (top layer)."""
