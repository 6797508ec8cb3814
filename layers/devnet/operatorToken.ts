// The devnet's operator token when OPERATOR_TOKEN is unset: generated once and kept in DATA_DIR/operator-token (mode
// 0600), so a restart does not log the console out; the banner prints it at every start.
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { ensureWritableDir } from "../dataDir.js"

export const OPERATOR_TOKEN_FILE = "operator-token"

/** A token of the shape the config accepts (at least 16 characters). */
const valid = (text: string) => /^[A-Za-z0-9_-]{16,256}$/.test(text)

/** The stored token, or a new one written there (atomically: a temporary file renamed into place). */
export const devnetOperatorToken = async (dataDir: string): Promise<string> => {
  const file = path.join(dataDir, OPERATOR_TOKEN_FILE)
  const stored = await fs.readFile(file, "utf8").then((text) => text.trim(), () => undefined)
  if (stored !== undefined && valid(stored)) return stored
  await ensureWritableDir(dataDir, "DATA_DIR")
  const token = `devnet-${randomBytes(18).toString("base64url")}`
  const temporary = `${file}.${process.pid}.tmp`
  await fs.writeFile(temporary, `${token}\n`, { mode: 0o600 })
  await fs.rename(temporary, file)
  return token
}
