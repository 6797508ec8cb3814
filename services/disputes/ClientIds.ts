// Client ids: the X-Client-Id a payer gets with every paid execution, bound to its wallet by an HMAC so the service can
// check it without a lookup table, and nobody can make one for a wallet they did not pay from. The id is a bearer
// credential (it files disputes and evidence, and does not expire): views show its public handle instead.
import { Effect, Option, Redacted } from "effect"
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import { AppConfig } from "../../layers/Config.js"

const FORMAT = /^cl_([0-9a-f]{40})_([A-Za-z0-9_-]{22})$/
/** The devnet's secret is public like its keys: ids made with it are worthless outside devnet, where it is refused. */
const DEVNET_SECRET = createHash("sha256").update("agent-marketplace devnet client ids").digest()

/** `clh_` + sha256(clientId) (hex), first 32 digits: what views show for a client id (docs/clients.md). */
export const clientHandleOf = (clientId: string) => `clh_${createHash("sha256").update(clientId).digest("hex").slice(0, 32)}`

export class ClientIds extends Effect.Service<ClientIds>()("disputes/ClientIds", {
  effect: Effect.gen(function* () {
    const config = yield* AppConfig
    // Required outside devnet (layers/Config.ts refuses to start without it).
    const secret = Option.match(config.clientIdSecret, { onNone: () => DEVNET_SECRET, onSome: (s) => Buffer.from(Redacted.value(s)) })
    const tag = (wallet: string) => createHmac("sha256", secret).update(`x-client-id:v1:${wallet}`).digest().subarray(0, 16)

    /** The client id of a payer wallet (0x address, any case). */
    const issue = (wallet: string) => {
      const hex = wallet.toLowerCase().replace(/^0x/, "")
      return `cl_${hex}_${tag(`0x${hex}`).toString("base64url")}`
    }

    /** The payer wallet an id was issued to (lowercase 0x address), if it is one of ours. */
    const verify = (id: string | undefined): Option.Option<string> => {
      const match = id === undefined ? null : FORMAT.exec(id)
      if (match === null) return Option.none()
      const wallet = `0x${match[1]}`
      // Compared as text: base64url's padding bits would otherwise give each id 16 spellings.
      const given = Buffer.from(match[2] ?? "")
      const expected = Buffer.from(tag(wallet).toString("base64url"))
      return given.length === expected.length && timingSafeEqual(given, expected) ? Option.some(wallet) : Option.none()
    }
    /**
     * The public handle of a payer's client id, shown where views name the client (a dispute's `client_id`):
     * `clh_` + the first 32 hex digits of sha256(the X-Client-Id text). The client recognises it (it hashes its own id);
     * nobody can turn it back into the id (the id's 128-bit tag is secret), and it authorises nothing.
     */
    const handle = (wallet: string) => clientHandleOf(issue(wallet))
    return { issue, verify, handle } as const
  })
}) {}
