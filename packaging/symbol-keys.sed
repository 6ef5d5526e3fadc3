# The key of a function's symbol: its name without what changes from one build of the same code
# to another (packaging/order-functions.sh writes keys, packaging/link-ordered maps them back).
# Legacy names end in a hash of the whole instance.
s/17h[0-9a-f]{16}E$/E/
# v0 names spell out their generic arguments but carry each crate's disambiguator (cargo's
# `-C metadata`, which moves with features and profiles), and back-references, whose offsets
# move with the disambiguators' lengths.
/^_R/{
s/Cs[0-9A-Za-z]*_/Cs_/g
s/B[0-9A-Za-z]*_/B_/g
}
