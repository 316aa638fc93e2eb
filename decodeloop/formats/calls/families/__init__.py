"""The call formats of open-weight model families, one module each (formats/calls/formats.py names them)."""
