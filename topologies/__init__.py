"""Fabric description files (package data: the catalog, one YAML file per system), their
schema and loader, text views of them, and `topo detect`'s reading of the live node."""
