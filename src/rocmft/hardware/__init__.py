"""What the code runs on: the arch table (docker/arches.yaml as typed data), the package pins an arch's image is
built with (versions), and this host's facts (devices, GPUs, memory, disks), read as data for doctor and plan.

May import: io.
"""
