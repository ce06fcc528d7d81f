// Addresses on the loopback interface for tests whose processes or tasks serve each other (gRPC).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace mirra::test {

// n addresses "127.0.0.1:<port>" whose ports were free a moment ago (bound to port 0, then released);
// empty when the sockets could not be made.
inline std::vector<std::string> free_local_addresses(int n) {
  std::vector<int> sockets;
  std::vector<std::string> addresses;
  for (int i = 0; i < n; ++i) {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) break;
    sockets.push_back(s);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      break;
    }
    addresses.push_back("127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
  }
  for (int s : sockets) ::close(s);
  if (addresses.size() != static_cast<size_t>(n)) addresses.clear();
  return addresses;
}

}  // namespace mirra::test
