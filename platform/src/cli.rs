//! The `jig` command line.
