"""RocketMQ's own rules, per release, in one place: which release does what (``releases``), the broker settings
a store was written with (``settings``), which records get a ConsumeQueue entry and which IndexFile keys
(``dispatch``), where an entry goes in its queue and a queue's bounds (``consumequeue``), how keys are put into
an IndexFile (``indexfile``), and what a restart does to the store (``recovery``).

Below verify, rebuild and recovery, which all follow these rules; above ``store`` (the rules read store files
through it) and ``codec``. A new store engine's rules get a module here."""
