// The trivial agent of the benchmark as a child process: reports its port over IPC, exits when the parent goes away.
import { startEchoAgent } from "./lib/echo-agent.js"

const agent = await startEchoAgent()
if (process.send !== undefined) process.send({ type: "listening", port: agent.port })
else console.log(`agent listening on http://127.0.0.1:${agent.port}`)

process.on("disconnect", () => process.exit(0))
process.on("SIGTERM", () => process.exit(0))
process.on("SIGINT", () => process.exit(0))
