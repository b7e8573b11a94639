"""One module per benchmark figure; each ``measure(scale, workdir) -> Figure``."""
