"""What the provider adds to Airflow's web server (an Airflow plugin; see ``plugin.py``)."""
