// PLACEHOLDER: tests to be written.
