"""Units the package counts in, defined once."""

MIB = 2**20          # bytes in a mebibyte: every MiB the book prints divides by this
GIB = 2**30          # bytes in a gibibyte
