"""Devices, memory, streams, events and kernel launches (no PTX syntax, no C ABI here)."""
