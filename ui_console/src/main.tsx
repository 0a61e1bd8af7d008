// The bundle's entry: Airflow's UI imports this file and renders globalThis.AirflowPlugin.
import { Console } from "./Console";

(globalThis as unknown as { AirflowPlugin: unknown }).AirflowPlugin = Console;
