"""Getting modules in and out of x64guard: MLIR text, MLIR bytecode and StableHLO portable
artifacts (`modules`), with untrusted bytecode vetted first in a separate reader process
(`isolated_reader`, whose program is `_bytecode_reader`)."""
