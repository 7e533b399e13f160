# Run by `imagekit check` in the image (sh -c <this file> sh USER KEY_DIR COMMAND...), once,
# before any check starts sshd: the state those checks change (/run/sshd), the profile's
# user's IDs, which of the commands the checks need are on PATH, where sshd and bash are, the
# private keys baked into the profile's key directory. One
# `KEY<TAB>VALUE` line each, so one exec instead of one per fact. Always prints `end`, so an
# answer with no output is the engine's loss, never the image's.
user=$1
key_dir=$2
shift 2
printf 'run_sshd\t%s\n' "$(stat -c '%U %a %F' /run/sshd 2>/dev/null || echo missing)"
if uid=$(id -u "$user" 2>/dev/null) && gid=$(id -g "$user" 2>/dev/null); then
    printf 'uid\t%s\ngid\t%s\n' "$uid" "$gid"
fi
for command in "$@"; do
    command -v "$command" >/dev/null 2>&1 && printf 'has\t%s\n' "$command"
done
for path in /usr/sbin/sshd /usr/local/sbin/sshd; do
    if test -e "$path"; then printf 'sshd\t%s\n' "$path"; break; fi
done
for path in /bin/bash /usr/bin/bash; do
    if test -e "$path"; then printf 'bash\t%s\n' "$path"; break; fi
done
for name in id_rsa id_ed25519 id_ecdsa; do
    if test -e "$key_dir/$name"; then printf 'key\t%s\n' "$key_dir/$name"; fi
done
printf 'end\t1\n'
