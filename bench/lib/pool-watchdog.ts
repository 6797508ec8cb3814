// Works around an anvil transaction-pool stall seen under concurrent sends from one account: now and then the
// transaction whose nonce is exactly the account's next nonce sits in the pool's *queued* set and is never mined (it
// seems to have arrived while its predecessor was being mined, so the marker it waits for was already pruned), and
// every later transaction of the account queues behind it; evm_mine does not help. A settlement stuck like that makes
// the waiting call time out after 120 s and the run invalid.
//
// The watchdog polls txpool_status; when the same (sender, next nonce K) stays queued on two checks in a row, it sets
// the sender's nonce back to K-1 (anvil_setNonce) and sends a 0-value self-transfer with nonce K-1 from it (dev
// accounts only): that transaction provides the marker K waits for, K and everything behind it are mined, and the
// servers' own transactions are never touched (dropping and re-sending the pool instead loses transactions that
// arrive meanwhile). Every rescue is logged and reported: it is a devnet defect, not something the services do.
import { createWalletClient, type Hex, http } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { DEV_PRIVATE_KEYS, devnetChain } from "../../layers/devnet/anvil.js"

interface PooledTx {
  readonly sender: string
  readonly nonce: number
  readonly hash: string
}

export interface Rescue {
  readonly label: string
  readonly sender: string
  readonly nonce: number
}

export class PoolWatchdog {
  readonly rescues: Array<Rescue> = []
  /** Named after the phase running, for the report. */
  label = "set-up"
  private suspect: string | undefined
  private running = false
  private readonly timer: NodeJS.Timeout

  constructor(private readonly rpcUrl: string, intervalMs = 500, private readonly log: (line: string) => void = () => undefined) {
    this.timer = setInterval(() => void this.check(), intervalMs)
    this.timer.unref()
  }

  stop(): void {
    clearInterval(this.timer)
  }

  private async rpc(method: string, params: ReadonlyArray<unknown> = []): Promise<unknown> {
    const response = await fetch(this.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      signal: AbortSignal.timeout(10_000)
    })
    const body = (await response.json()) as { readonly result?: unknown; readonly error?: unknown }
    if (body.error !== undefined) throw new Error(`${method}: ${JSON.stringify(body.error)}`)
    return body.result
  }

  private async pooled(): Promise<{ readonly pending: Array<PooledTx>; readonly queued: Array<PooledTx> }> {
    const content = (await this.rpc("txpool_content")) as Record<string, Record<string, Record<string, { readonly hash?: string }>>> | null
    const list = (group: Record<string, Record<string, { readonly hash?: string }>> | undefined) =>
      Object.entries(group ?? {}).flatMap(([sender, byNonce]) =>
        Object.entries(byNonce).map(([nonce, tx]) => ({ sender: sender.toLowerCase(), nonce: Number(nonce), hash: tx.hash ?? "" })))
    return { pending: list(content?.["pending"]), queued: list(content?.["queued"]) }
  }

  private async check(): Promise<void> {
    if (this.running) return
    this.running = true
    try {
      const status = (await this.rpc("txpool_status")) as { readonly queued?: string } | null
      if (Number(status?.queued ?? "0x0") === 0) {
        this.suspect = undefined
        return
      }
      const { pending, queued } = await this.pooled()
      let found: string | undefined
      for (const sender of new Set(queued.map((t) => t.sender))) {
        const next = Number(await this.rpc("eth_getTransactionCount", [sender, "latest"]))
        const stuck = queued.some((t) => t.sender === sender && t.nonce === next) &&
          !pending.some((t) => t.sender === sender && t.nonce === next)
        if (stuck) {
          found = `${sender}:${next}`
          break
        }
      }
      if (found !== undefined && found === this.suspect) {
        await this.rescue(found)
        this.suspect = undefined
      } else {
        this.suspect = found
      }
    } catch {
      // the chain is busy or going away; try again next time
    } finally {
      this.running = false
    }
  }

  private async rescue(key: string): Promise<void> {
    const [sender = "", nonceText = "0"] = key.split(":")
    const nonce = Number(nonceText)
    const devKey = DEV_PRIVATE_KEYS.find((k) => privateKeyToAccount(k).address.toLowerCase() === sender)
    if (devKey === undefined || nonce === 0) {
      this.log(`    anvil pool stall during ${this.label}: nonce ${nonce} of ${sender} is stuck in "queued" and cannot be cleared (not a dev account)`)
      return
    }
    const account = privateKeyToAccount(devKey as Hex)
    const wallet = createWalletClient({ account, chain: devnetChain(this.rpcUrl), transport: http(this.rpcUrl, { retryCount: 0 }) })
    await this.rpc("anvil_setNonce", [sender, `0x${(nonce - 1).toString(16)}`])
    await wallet.sendTransaction({ to: account.address, value: 0n, nonce: nonce - 1, gas: 21_000n })
    const rescue = { label: this.label, sender, nonce }
    this.rescues.push(rescue)
    this.log(`    anvil pool stall during ${this.label}: nonce ${nonce} of ${sender} was stuck in "queued"; released it with a filler transaction at nonce ${nonce - 1}`)
  }
}
