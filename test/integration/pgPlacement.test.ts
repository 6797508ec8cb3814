// As root the embedded PostgreSQL's cluster may have to live outside DATA_DIR (the `postgres` user cannot reach a
// checkout under /root): it is then linked from DATA_DIR/postgres, kept between runs, and deleting DATA_DIR deletes it
// at the next start, as if it had lived there (a newcomer who starts over gets a new database with the new devnet).
import { access, chmod, lstat, mkdir, mkdtemp, readlink, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { placePostgres } from "../../layers/pgAccess.js"

const exists = (file: string) => access(file).then(() => true, () => false)
const moved: Array<string> = []
afterAll(() => Promise.all(moved.map((dir) => rm(dir, { recursive: true, force: true }))))

describe.skipIf(process.getuid?.() !== 0)("as root, a DATA_DIR the postgres user cannot reach", () => {
  it("the cluster is linked from DATA_DIR/postgres, kept between starts, and starts over when DATA_DIR is deleted", async () => {
    const home = await mkdtemp(join(tmpdir(), "marketplace-home-"))
    await chmod(home, 0o700)
    const dataDir = join(home, ".data")
    const requested = join(dataDir, "postgres")
    try {
      const first = await placePostgres(requested)
      moved.push(dirname(first.dataDir))
      expect(first.dataDir.startsWith(dataDir)).toBe(false)
      expect(await readlink(requested)).toBe(first.dataDir)
      // A cluster with data in it.
      await mkdir(first.dataDir, { recursive: true })
      await writeFile(join(first.dataDir, "PG_VERSION"), "18\n")

      const again = await placePostgres(requested)
      expect(again.dataDir).toBe(first.dataDir)
      expect(await exists(join(first.dataDir, "PG_VERSION"))).toBe(true)

      await rm(dataDir, { recursive: true, force: true })
      const over = await placePostgres(requested)
      expect(over.dataDir).toBe(first.dataDir)
      expect(await exists(join(first.dataDir, "PG_VERSION"))).toBe(false)
      expect(await readlink(requested)).toBe(first.dataDir)
    } finally {
      await rm(home, { recursive: true, force: true })
    }
  })

  it("a cluster moved before links existed is adopted as it is (an existing deployment keeps its data)", async () => {
    const home = await mkdtemp(join(tmpdir(), "marketplace-home-"))
    await chmod(home, 0o700)
    const requested = join(home, ".data", "postgres")
    try {
      const first = await placePostgres(requested)
      moved.push(dirname(first.dataDir))
      // As the previous placement left it: the moved cluster, no link, no record of one.
      await rm(requested)
      await rm(join(dirname(first.dataDir), "linked-from"))
      await mkdir(first.dataDir, { recursive: true })
      await writeFile(join(first.dataDir, "PG_VERSION"), "18\n")

      const adopted = await placePostgres(requested)
      expect(adopted.dataDir).toBe(first.dataDir)
      expect(await exists(join(first.dataDir, "PG_VERSION"))).toBe(true)
      expect((await lstat(requested)).isSymbolicLink()).toBe(true)
    } finally {
      await rm(home, { recursive: true, force: true })
    }
  })
})
