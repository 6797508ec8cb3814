// A complete AppConfig for tests that build single layers by hand (devnet defaults; override what the test is about).
import { Option } from "effect"
import type { AppConfigShape } from "../../layers/Config.js"

export const testAppConfig = (overrides: Partial<AppConfigShape> = {}): AppConfigShape => ({
  port: 0,
  host: "127.0.0.1",
  databaseUrl: Option.none(),
  dataDir: "/nonexistent",
  chainMode: "devnet",
  chainRpcUrl: Option.none(),
  usdcAddress: Option.none(),
  treasuryPrivateKey: Option.none(),
  facilitatorUrl: Option.none(),
  operatorToken: Option.none(),
  allowPrivateUrls: false,
  publicBaseUrl: "http://127.0.0.1:3000",
  maxBodyBytes: 1024 * 1024,
  paymentMinValiditySeconds: 6,
  paymentTimeoutSeconds: 120,
  agentCacheTtlMs: 30_000,
  clientIdSecret: Option.none(),
  webhookSecretKey: Option.none(),
  webhookSecretKeyPrevious: Option.none(),
  chainTokenSecret: Option.none(),
  ...overrides
})
