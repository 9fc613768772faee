"""The database under the archive: the tables and their migrations, opening an engine for SQLite
or PostgreSQL (with SQLite's pragmas and the ride through a dropped connection), checking and
upgrading an archive's schema, and the optuna storage that keeps each run's study in the same
database. Internal to the archive layer, whose face is `agentdesign.archive`."""
