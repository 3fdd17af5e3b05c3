"""RocksDB as Flink's state backends leave it: a handle's directory rebuilt from a checkpoint
(:mod:`~ckptctl.rocksdb.handledir`) and the SST files read where rocksdict cannot
(:mod:`~ckptctl.rocksdb.sst`). rocksdict is imported only when a directory is opened."""
