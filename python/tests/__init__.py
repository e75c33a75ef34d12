"""Server-less unit tests of the package (protocol code, errors, hash tags): no
pion-server, milliseconds each. A package, so that pytest puts python/ on sys.path
(the package under test comes from this source tree)."""
