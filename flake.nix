{
  description = "Self-hosted AI gateway: development shell";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in {
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          # Node 20 runs the gateway; python3, gcc and make build better-sqlite3; sqlite to inspect data/gateway.db.
          packages = [ pkgs.nodejs_20 pkgs.python3 pkgs.gcc pkgs.gnumake pkgs.sqlite ];
          shellHook = ''
            echo "gateway dev shell: node $(node --version). Run: npm install && npm test"
          '';
        };
      });
    };
}
