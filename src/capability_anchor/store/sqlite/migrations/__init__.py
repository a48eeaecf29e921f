"""The SQLite schema's migrations, one module per version after the first."""
