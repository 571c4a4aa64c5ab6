"""Helpers of the ``rocketstore_store_audit`` DAG (jobs/airflow/rocketstore_store_audit.py): not DAGs
(.airflowignore keeps Airflow's parser out of here), imported by the DAG from the dags folder.

- ``config``: the DAG's settings (params, Airflow Variables, defaults) made into paths, in the worker.
- ``outcome``: one store's verdict from the audit's JSON documents, and the run's decision; plain Python.
- ``seen``: the error findings each store had at its last run, so that an alert names the new ones.
- ``report``: the alert's text.
- ``notifiers``: the default notifier, a report file.
- ``spark_answer``: what SparkSubmitOperator submits, in the Spark driver: one of our jobs, whose exit 3 is
  an answer (damage found) recorded in a file, not a failed task.
"""
