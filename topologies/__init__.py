"""Fabric description files (package data) and their loader. Catalog: not yet shipped."""
