// The console's build: one IIFE file, ../airflow_provider_kafka_eos/ui/console_dist/console.js.
// Airflow's UI imports it and reads the component from globalThis.AirflowPlugin; React, its JSX
// runtime, Chakra UI and Emotion are Airflow's own (it puts them on globalThis), not bundled, so
// the console renders with Airflow's theme and colour mode.
import { defineConfig } from "vite";

const GLOBALS: Record<string, string> = {
  react: "React",
  "react-dom": "ReactDOM",
  "react/jsx-runtime": "ReactJSXRuntime",
  "@chakra-ui/react": "ChakraUI",
  "@emotion/react": "EmotionReact",
};

export default defineConfig({
  esbuild: { jsx: "automatic" },
  define: { "process.env.NODE_ENV": JSON.stringify("production") },
  build: {
    outDir: "../airflow_provider_kafka_eos/ui/console_dist",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2020",
    lib: {
      entry: "src/main.tsx",
      formats: ["iife"],
      name: "KafkaEosConsole",
      fileName: () => "console.js",
    },
    rollupOptions: {
      external: Object.keys(GLOBALS),
      output: { globals: GLOBALS },
    },
  },
});
