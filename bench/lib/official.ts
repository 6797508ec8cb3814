// The official x402 stack as a bench target (bench/official.ts): `x402-express` in front of the echo agent and a local
// facilitator from the `x402` package, both from bench/official (its own package.json and lock, installed on demand so
// that the root `npm ci` and CI never pull its ~700 MB of wallet dependencies).
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync, statSync } from "node:fs"
import * as path from "node:path"
import { DEV_PRIVATE_KEYS, DEVNET_USDC_ADDRESS } from "../../layers/devnet/anvil.js"
import { privateKeyToAccount } from "viem/accounts"
import { baseEnv, type Child, spawnChild } from "./children.js"
import { BenchError, log, PRICE, ROOT } from "./params.js"
import type { Infra } from "./servers.js"

export const OFFICIAL_DIR = path.join(ROOT, "bench", "official")

/** `npm ci --prefix bench/official` when its node_modules is missing or older than its lock; returns the versions in use. */
export const ensureOfficialInstalled = (): { readonly express: string; readonly x402: string; readonly x402Express: string } => {
  const modules = path.join(OFFICIAL_DIR, "node_modules")
  const marker = path.join(modules, ".package-lock.json")
  const lock = path.join(OFFICIAL_DIR, "package-lock.json")
  if (!existsSync(marker) || statSync(marker).mtimeMs < statSync(lock).mtimeMs) {
    log("  installing the official x402 stack into bench/official/node_modules (npm ci, once; ~700 MB)")
    try {
      execFileSync("npm", ["ci", "--prefix", OFFICIAL_DIR, "--no-audit", "--no-fund", "--loglevel=error"], { stdio: "inherit" })
    } catch (error) {
      throw new BenchError(`npm ci --prefix bench/official failed: ${String(error)}`)
    }
  }
  const version = (name: string) => {
    try {
      const parsed: unknown = JSON.parse(readFileSync(path.join(modules, name, "package.json"), "utf8"))
      return typeof parsed === "object" && parsed !== null && "version" in parsed ? String(parsed.version) : "?"
    } catch {
      return "?"
    }
  }
  return { express: version("express"), x402: version("x402"), x402Express: version("x402-express") }
}

export interface OfficialStack {
  readonly app: Child
  readonly facilitator: Child
  readonly origin: string
  readonly stop: () => Promise<void>
}

/** Starts the facilitator (settling from dev account 0, like the marketplace and the paywall), then the app in front of the agent. */
export type OfficialSigner = "package" | "nonce-manager"

export const startOfficial = async (infra: Infra, name: string, signer: OfficialSigner): Promise<OfficialStack> => {
  const key = DEV_PRIVATE_KEYS[0]
  if (key === undefined) throw new BenchError("no dev key 0")
  const facilitator = spawnChild(`${name} facilitator`, process.execPath, [path.join(OFFICIAL_DIR, "facilitator.mjs")], {
    env: { ...baseEnv(), RPC_URL: infra.rpcUrl, FACILITATOR_KEY: key, SIGNER: signer },
    cwd: OFFICIAL_DIR,
    ipc: true
  })
  try {
    const fReady = await facilitator.message("listening", 60_000)
    const app = spawnChild(`${name} app`, process.execPath, [path.join(OFFICIAL_DIR, "app.mjs")], {
      env: {
        ...baseEnv(),
        FACILITATOR_URL: `http://127.0.0.1:${String(fReady["port"])}`,
        AGENT_URL: infra.agentUrl,
        PAY_TO: privateKeyToAccount(key).address,
        PRICE: PRICE.toString(),
        ASSET: DEVNET_USDC_ADDRESS
      },
      cwd: OFFICIAL_DIR,
      ipc: true
    })
    const aReady = await app.message("listening", 60_000).catch(async (error: unknown) => {
      await app.stop()
      throw error
    })
    return {
      app,
      facilitator,
      origin: `http://127.0.0.1:${String(aReady["port"])}`,
      stop: async () => {
        await app.stop()
        await facilitator.stop()
      }
    }
  } catch (error) {
    await facilitator.stop()
    throw error
  }
}
